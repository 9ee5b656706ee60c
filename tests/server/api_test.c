/* Filled in below. */
int main(void)
{
    return 77;
}
